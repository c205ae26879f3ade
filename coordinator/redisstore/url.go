package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// ParseURL parses a store URL into Options:
//
//	redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/0][?OPTIONS]
//	rediss://...   the same over TLS
//
// The addresses are a Redis Cluster's seed nodes, or one standalone server
// (detected: see ModeAuto). OPTIONS, joined by &:
//
//	sentinel=NAME   the addresses are Sentinels watching the master NAME
//	mode=M          cluster or standalone, to say it rather than detect it
//	ca=FILE         rediss: trust the PEM certificates in FILE (default: the system's roots)
//
// A user and password in the URL are taken too (prefer
// EDGELIMIT_REDIS_USERNAME and EDGELIMIT_REDIS_PASSWORD: command lines are
// visible to other users; EDGELIMIT_REDIS_SENTINEL_USERNAME and
// EDGELIMIT_REDIS_SENTINEL_PASSWORD for the Sentinels).
func ParseURL(s string) (Options, error) {
	var o Options
	rest, ok := strings.CutPrefix(s, "redis://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "rediss://"); ok {
			o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if !ok {
		return o, fmt.Errorf("redisstore: store %q: want redis://HOST:PORT[,HOST:PORT...], or rediss:// for TLS", redact(s))
	}
	rest, query, _ := strings.Cut(rest, "?")
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		u, err := url.Parse("redis://" + rest[:at+1] + "x")
		if err != nil { // its text would show the password
			return o, fmt.Errorf("redisstore: store: the user and password are not valid in a URL (escape reserved characters as %%XX)")
		}
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
		rest = rest[at+1:]
	}
	rest, db, _ := strings.Cut(rest, "/")
	if db != "" && db != "0" {
		// (It was dropped: /3 wrote to database 0.)
		return o, fmt.Errorf("redisstore: store %q: database /%s: edgelimit keeps its keys in database 0 (a Redis Cluster has no other); give it its own Redis, or an ACL user of its own keys", redact(s), db)
	}
	for _, a := range strings.Split(rest, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := splitHostPort(a); err != nil {
			return o, fmt.Errorf("redisstore: store %q: %w", redact(s), err)
		}
		o.Addrs = append(o.Addrs, a)
	}
	if len(o.Addrs) == 0 {
		return o, fmt.Errorf("redisstore: store %q: no HOST:PORT", redact(s))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return o, fmt.Errorf("redisstore: store options %q: %w", query, err)
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch k {
		case "sentinel":
			o.Mode, o.SentinelMaster = ModeSentinel, val
			if val == "" {
				return o, fmt.Errorf("redisstore: store: sentinel= needs the master's name")
			}
		case "mode":
			if val != string(ModeCluster) && val != string(ModeStandalone) {
				return o, fmt.Errorf("redisstore: store: mode=%q: want cluster or standalone (sentinel=NAME for Sentinels)", val)
			}
			if o.Mode != ModeSentinel {
				o.Mode = Mode(val)
			}
		case "ca":
			if o.TLS == nil {
				return o, fmt.Errorf("redisstore: store: ca= is for rediss:// (TLS)")
			}
			pem, err := os.ReadFile(val)
			if err != nil {
				return o, fmt.Errorf("redisstore: store: ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return o, fmt.Errorf("redisstore: store: ca %s: no PEM certificate", val)
			}
			o.TLS.RootCAs = pool
		default:
			return o, fmt.Errorf("redisstore: store: unknown option %q (want sentinel, mode or ca)", k)
		}
	}
	return o, nil
}

// redact hides the password of a store URL, for error messages.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxx" + rest[at:]
}
