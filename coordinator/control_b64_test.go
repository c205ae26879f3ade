package coordinator

import (
	"encoding/base64"
	"strings"
	"testing"
)

// Overrides and pauses of keys that are not valid UTF-8 are shown by their
// bytes (overrides_b64, key_b64): in JSON text two such keys read as the
// same string of U+FFFD and collided in the overrides map, and a resume
// by the shown text named another key.
func TestControlViewKeysThatAreNotUTF8(t *testing.T) {
	_, _, srv := newTestServer(t, nil)
	b64 := func(k string) string { return base64.RawURLEncoding.EncodeToString([]byte(k)) }
	mustControl(t, srv, "PUT", "/v1/limiters/fw/overrides/"+b64("\xff")+"?encoding=base64url", `{"limit": 5}`, "")
	mustControl(t, srv, "PUT", "/v1/limiters/fw/overrides/"+b64("\xfe")+"?encoding=base64url", `{"limit": 6}`, "")
	mustControl(t, srv, "PUT", "/v1/limiters/fw/overrides/plain", `{"limit": 7}`, "")
	v := mustControl(t, srv, "POST", "/v1/limiters/fw/pause/"+b64("\xfd")+"?encoding=base64url", `{"for": "10m", "reason": "test"}`, "")
	l := v.Limiters[0]
	if l.OverridesB64[b64("\xff")] != 5 || l.OverridesB64[b64("\xfe")] != 6 || len(l.OverridesB64) != 2 {
		t.Fatalf("overrides_b64 %v, want both keys", l.OverridesB64)
	}
	if l.Overrides["plain"] != 7 || l.Overrides["vip"] != 1000 || len(l.Overrides) != 2 {
		t.Fatalf("overrides %v, want plain and vip only", l.Overrides)
	}
	var seen []string
	for _, ch := range l.Changes {
		seen = append(seen, ch.KeyB64)
	}
	if got := strings.Join(seen, ","); got != b64("\xff")+","+b64("\xfe")+","+b64("plain") {
		t.Fatalf("changes' key_b64: %s", got)
	}
	if len(v.Pauses) != 1 || v.Pauses[0].KeyB64 != b64("\xfd") {
		t.Fatalf("pauses %+v", v.Pauses)
	}
	// The pause is resumed by the bytes it shows.
	v = mustControl(t, srv, "DELETE", "/v1/limiters/fw/pause/"+v.Pauses[0].KeyB64+"?encoding=base64url&reason=done", "", "")
	if len(v.Pauses) != 0 {
		t.Fatalf("after the resume: pauses %+v", v.Pauses)
	}
}
