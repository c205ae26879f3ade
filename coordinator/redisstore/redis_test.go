package redisstore

import (
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/internal/selfsigned"
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
	// A database index other than 0 is refused (it was dropped: /3 wrote
	// to database 0); /0 is database 0.
	if _, err := ParseURL("redis://10.0.0.1:6379/3"); err == nil || !strings.Contains(err.Error(), "database /3") {
		t.Errorf("database 3: %v; want refused, naming it", err)
	}
	if o, err := ParseURL("redis://10.0.0.1:6379/0?mode=standalone"); err != nil || o.Mode != ModeStandalone || len(o.Addrs) != 1 {
		t.Errorf("database 0: %+v %v", o, err)
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

// TestParseURLOptions: rediss:// turns TLS on, ca= loads the roots,
// sentinel= and mode= choose the mode; bad options and a ca without TLS
// are refused, and errors never show the password.
func TestParseURLOptions(t *testing.T) {
	dir := t.TempDir()
	p, err := selfsigned.Write(dir, "ca", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ca := p.CertFile
	o, err := ParseURL("rediss://u:p@127.0.0.1:6380?ca=" + ca)
	if err != nil || o.TLS == nil || o.TLS.RootCAs == nil || o.Mode != ModeAuto || o.Username != "u" {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseURL("redis://10.0.0.1:26379,10.0.0.2:26379?sentinel=mymaster")
	if err != nil || o.Mode != ModeSentinel || o.SentinelMaster != "mymaster" || len(o.Addrs) != 2 || o.TLS != nil {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseURL("redis://10.0.0.1:6379?mode=standalone")
	if err != nil || o.Mode != ModeStandalone {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []string{"redis://u:secret@h:1?ca=" + ca, "rediss://u:secret@h:1?ca=/nonexistent", "redis://h:1?mode=ring",
		"redis://h:1?sentinel=", "redis://u:secret@h:1?bogus=1", "rediss://u:secret@h:1?ca=" + filepath.Join(dir, "ca-key.pem") + "x"} {
		_, err := ParseURL(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret") || !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Errorf("%q: error %q", bad, err)
		}
	}
	if _, err := ParseURL("rediss://u:secret@h"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("no port: %v", err)
	}
}

// FuzzParseURL: any store URL gives Options or an error prefixed
// "redisstore: "; the same URL with the password PWMARK never shows it in
// the error; accepted URLs have at least one HOST:PORT with a valid port.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://h:1", "rediss://u:pw@h:1,g:2?mode=standalone", "redis://h:1?sentinel=m",
		"redis://u:pw@h:1?ca=/x", "redis://u:pw@", "rediss://:pw@[::1]:6379/0?mode=cluster&mode=standalone", "redis://u:p@w@h:1?x=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			if at := strings.LastIndexByte(rest, '@'); at >= 0 {
				user, _, _ := strings.Cut(rest[:at], ":")
				marked := scheme + "://" + user + ":PWMARK" + rest[at:]
				if _, err := ParseURL(marked); err != nil && strings.Contains(err.Error(), "PWMARK") {
					t.Fatalf("%q: error %q shows the password", marked, err)
				}
			}
		}
		o, err := ParseURL(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("%q: error %q without the package prefix", s, err)
			}
			return
		}
		if len(o.Addrs) == 0 {
			t.Fatalf("%q: accepted without an address", s)
		}
		for _, a := range o.Addrs {
			if _, _, err := splitHostPort(a); err != nil {
				t.Fatalf("%q: accepted address %q: %v", s, a, err)
			}
		}
	})
}

// TestBucketIsFNV1a: a key's bucket is FNV-1a (64 bits) of its storage key
// mod the bucket count, as hash/fnv computes it: the layout every
// coordinator of a cluster (and every key already stored) relies on.
func TestBucketIsFNV1a(t *testing.T) {
	for _, buckets := range []int{4, 64, 512, 1000} {
		s := &Store{opts: Options{Buckets: buckets}}
		for i := 0; i < 2000; i++ {
			k := []byte(merge.KeyStorageKey("lim"+strconv.Itoa(i%7), "key-"+strconv.Itoa(i*7919)))
			h := fnv.New64a()
			h.Write(k)
			if got, want := s.Bucket(k), int(h.Sum64()%uint64(buckets)); got != want {
				t.Fatalf("%d buckets, key %q: bucket %d, FNV-1a says %d", buckets, k, got, want)
			}
		}
	}
}
