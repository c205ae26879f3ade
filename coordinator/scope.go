package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Isolate namespaces. Each bearer token has its own namespace of isolate
// ids: the coordinator keys an isolate's high-water mark, its per-key
// recency and its strict leases by scope + id, where scope is derived from
// the token that syncs it (tokenScope). A client holding one token thus
// cannot name, stall or take over an isolate that syncs with another. A
// coordinator without tokens (loopback, or --insecure) has one trusted
// namespace, the empty scope, and stores ids as they come.

// tokenScope returns the scope of token: the first 8 bytes of its SHA-256
// in hex and a '/' (so the stored ids do not reveal the token).
func tokenScope(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:8]) + "/"
}

type principalKey struct{}

// withPrincipal returns ctx carrying the request's principal: its token's
// isolate namespace and roles (roles.go).
func withPrincipal(ctx context.Context, p *principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns the principal carried by ctx (nil when none: a
// coordinator without tokens).
func principalOf(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// scopeOf returns the isolate namespace carried by ctx ("" when none).
func scopeOf(ctx context.Context) string {
	if p := principalOf(ctx); p != nil {
		return p.scope
	}
	return ""
}

// ownIsolates keeps in leases only the isolates of scope, their ids
// without it (stored ids are scope + id): a key's view shows no other
// token's isolates. Without tokens (scope "") every id is kept.
func ownIsolates(leases map[string]int64, scope string) map[string]int64 {
	out := make(map[string]int64, len(leases))
	for id, n := range leases {
		if own, ok := strings.CutPrefix(id, scope); ok {
			out[own] = n
		}
	}
	return out
}
