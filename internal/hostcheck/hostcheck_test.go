package hostcheck

import (
	"net"
	"slices"
	"testing"
)

// TestAllowed: Host headers of loopback, in any case, with or without a
// port or a trailing dot, pass; names that only start or end like them,
// and names not allowed, do not.
func TestAllowed(t *testing.T) {
	allowed := Parse(" proxy.example:443, ,Coord.Example. ")
	if want := []string{"proxy.example", "Coord.Example."}; !slices.Equal(allowed, want) {
		t.Fatalf("Parse: %q, want %q", allowed, want)
	}
	for host, want := range map[string]bool{
		"": true, "localhost": true, "LocalHost:7070": true, "localhost.": true, "ui.localhost:80": true,
		"127.0.0.1": true, "127.9.8.7:1": true, "[::1]:7070": true, "[::1]": true, "::1": true,
		"proxy.example": true, "PROXY.EXAMPLE:8443": true, "coord.example": true, "coord.example.:1": true,
		"evil.example": false, "localhost.evil.example": false, "evillocalhost": false, "127.0.0.1.nip.io": false,
		"proxy.example.evil": false, "xproxy.example": false, "10.0.0.1:7070": false, "[::2]:7070": false, "0.0.0.0": false,
	} {
		if got := Allowed(host, allowed); got != want {
			t.Errorf("Allowed(%q): %v, want %v", host, got, want)
		}
	}
	// IPv6 literals, bracketed or with a port, as a proxy's address.
	v6 := Parse("[fd00::5], [fd00::6]:443")
	for host, want := range map[string]bool{"[fd00::5]:80": true, "[fd00::5]": true, "[FD00::6]:8443": true, "[fd00::7]:80": false} {
		if got := Allowed(host, v6); got != want {
			t.Errorf("Allowed(%q) with %q: %v, want %v", host, v6, got, want)
		}
	}
	if !Allowed("evil.example", []string{Any}) {
		t.Error("Any allows every host")
	}
	for addr, want := range map[string]bool{"127.0.0.1:7070": true, "[::1]:7070": true, "0.0.0.0:7070": false, "10.1.2.3:7070": false} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if Loopback(a) != want {
			t.Errorf("Loopback(%s): %v, want %v", addr, !want, want)
		}
	}
	if Loopback(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}) {
		t.Error("Loopback(unix socket): true")
	}
}
