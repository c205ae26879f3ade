package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

type scopeKey struct{}

// withScope returns ctx carrying the isolate namespace of the request.
func withScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// scopeOf returns the isolate namespace carried by ctx ("" when none).
func scopeOf(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}
