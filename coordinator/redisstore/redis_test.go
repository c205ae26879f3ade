package redisstore

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	o, err := ParseURL("redis://u:p@10.0.0.1:7000,10.0.0.2:7001")
	if err != nil || len(o.Addrs) != 2 || o.Addrs[1] != "10.0.0.2:7001" || o.Username != "u" || o.Password != "p" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []string{"http://x:1", "redis://", "redis://host", "redis://h:0"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestCredentialsFromEnv: the environment fills what the URL left out.
func TestCredentialsFromEnv(t *testing.T) {
	t.Setenv("EDGELIMIT_REDIS_USERNAME", "envuser")
	t.Setenv("EDGELIMIT_REDIS_PASSWORD", "envpass")
	o, err := ParseURL("redis://10.0.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	CredentialsFromEnv(&o)
	if o.Username != "envuser" || o.Password != "envpass" {
		t.Fatalf("%+v", o)
	}
	if _, err := ParseURL("http://x:1"); err == nil || !strings.HasPrefix(err.Error(), "redisstore: ") {
		t.Fatalf("error %v, want the redisstore: prefix", err)
	}
}
