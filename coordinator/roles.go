package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Token roles. A coordinator without Options.Grants is one trusted fleet:
// every token of Options.Tokens may do everything (sync any limiter, read
// the dashboard and keys, reset keys), as before roles existed. A Grant
// gives one token some roles only:
//
//	edge   POST /v1/sync, for the granted limiters only (Grant.Limiters;
//	       none named: every limiter): every entry, upstream signal,
//	       final denial and amendment's ask of the batch must name one of
//	       them
//	read   GET /v1/limiters, /v1/limiters/{name}/keys, /v1/isolates (the
//	       dashboard's read API) and GET /v1/limiters/{name}/keys/{key}
//	admin  DELETE /v1/limiters/{name}/keys/{key} (reset) and POST to it
//	       (pause the key: pause.go); the live control changes (limits,
//	       overrides, fleet pauses: control_http.go)
//
// A request its token's roles do not cover is refused 403 with the problem
// type urn:edgelimit:problem:forbidden, naming the role (or the limiter)
// missing; nothing of it is applied. Keys are one namespace for every
// token (the fleet shares its limits: that is what a global limit is), so
// a read or reset of a key is of the fleet's key and needs its role;
// isolate ids are each token's own (scope.go), and a key's view shows only
// the caller's isolates (KeyState.Leases, Upstream.Probe).

// Role is a set of rights of a bearer token (bits, combined with |).
type Role uint8

// The roles (see above).
const (
	RoleEdge Role = 1 << iota
	RoleRead
	RoleAdmin
	// RoleAll is every role: a token of Options.Tokens.
	RoleAll = RoleEdge | RoleRead | RoleAdmin
)

// String names the roles of r joined by '+' ("edge+read"), "none" for 0.
func (r Role) String() string {
	var names []string
	for i, n := range roleNames {
		if r&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}

var roleNames = [...]string{"edge", "read", "admin"}

// Grant gives a bearer token the roles Roles. Limiters, with RoleEdge,
// names the limiters the token may sync and report upstream signals for;
// empty means every limiter.
type Grant struct {
	Token    string
	Roles    Role
	Limiters []string
}

// ParseTokens reads the coordinator's --token value: tokens separated by
// ',', each either TOKEN (every role: Options.Tokens) or TOKEN:ROLES with
// ROLES roles joined by '+', a role being edge, edge=LIMITER|LIMITER...,
// read or admin (Options.Grants). Spaces around a token are trimmed; empty
// items are skipped. Example: "k1:edge=api|llm,k2:read+admin".
func ParseTokens(spec string) (tokens []string, grants []Grant, err error) {
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tok, roles, ok := strings.Cut(item, ":")
		if !ok {
			tokens = append(tokens, item)
			continue
		}
		g := Grant{Token: tok}
		rs := strings.Split(roles, "+")
		for j, r := range rs {
			name, lims, hasLims := strings.Cut(r, "=")
			i := slices.Index(roleNames[:], name)
			if i < 0 || hasLims && name != "edge" {
				// The role's text is not shown: a token mistyped into it would be.
				return nil, nil, fmt.Errorf("coordinator: token %s: role %d of %d is not edge, edge=LIMITER|..., read or admin", redact(tok), j+1, len(rs))
			}
			g.Roles |= 1 << i
			if hasLims {
				g.Limiters = append(g.Limiters, strings.Split(lims, "|")...)
			}
		}
		grants = append(grants, g)
	}
	if len(tokens) == 0 && len(grants) == 0 && strings.TrimSpace(spec) != "" {
		// (--token "," started a coordinator without tokens.)
		return nil, nil, fmt.Errorf("coordinator: the token list %q names no token", spec)
	}
	return tokens, grants, nil
}

// redact names a token in an error by its first 4 bytes.
func redact(tok string) string {
	if len(tok) > 4 {
		return fmt.Sprintf("%q...", tok[:4])
	}
	return `"..."`
}

// validateGrants reports the problems of the tokens and grants of o.
func (o *Options) validateGrants() error {
	var errs []error
	seen := map[string]bool{}
	for i, t := range o.Tokens {
		switch err := wire.CheckToken(t); {
		case t == "":
			errs = append(errs, errors.New("coordinator: Options.Tokens holds an empty token"))
		case err != nil:
			// No client can send it: refused rather than never matched.
			errs = append(errs, fmt.Errorf("coordinator: Options.Tokens[%d]: %w", i, err))
		}
		seen[t] = true
	}
	for i, g := range o.Grants {
		switch {
		case g.Token == "":
			errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: empty token", i))
		case wire.CheckToken(g.Token) != nil:
			errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: %w", i, wire.CheckToken(g.Token)))
		case seen[g.Token]:
			errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: token %s given twice", i, redact(g.Token)))
		case g.Roles == 0 || g.Roles&^RoleAll != 0:
			errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: roles must be edge, read and/or admin", i))
		case len(g.Limiters) > 0 && g.Roles&RoleEdge == 0:
			errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: limiters are granted with the edge role only", i))
		}
		seen[g.Token] = true
		for _, l := range g.Limiters {
			if !slices.ContainsFunc(o.Config.Limiters, func(c wire.LimiterConfig) bool { return c.Name == l }) {
				errs = append(errs, fmt.Errorf("coordinator: Options.Grants[%d]: unknown limiter %q", i, l))
			}
		}
	}
	return errors.Join(errs...)
}

// edgeTokens returns how many tokens may sync (the edge role).
func (o *Options) edgeTokens() int {
	n := len(o.Tokens)
	for _, g := range o.Grants {
		if g.Roles&RoleEdge != 0 {
			n++
		}
	}
	return n
}

// principal is what the bearer token of a request may do.
type principal struct {
	scope    string          // its isolate namespace (scope.go)
	roles    Role            // RoleAll without Grants
	limiters map[string]bool // edge: the granted limiters; nil: all
}

// kept returns the items of xs that keep, in a new slice when it drops any
// (a reply's slices may share their arrays with the coordinator's state),
// else xs itself.
func kept[T any](xs []T, keep func(*T) bool) []T {
	for i := range xs {
		if keep(&xs[i]) {
			continue
		}
		out := make([]T, i, len(xs))
		copy(out, xs[:i])
		for j := i + 1; j < len(xs); j++ {
			if keep(&xs[j]) {
				out = append(out, xs[j])
			}
		}
		return out
	}
	return xs
}

// grants reports whether p's edge role is granted limiter l (every
// limiter without grants, or without a principal).
func (p *principal) grants(l string) bool { return p == nil || p.limiters == nil || p.limiters[l] }

// may reports whether p holds role (a request without a principal, on a
// coordinator without tokens, may do everything).
func (p *principal) may(role Role) bool { return p == nil || p.roles&role == role }

// grantedViews drops from rp the views of limiters p's edge role is not
// granted. A batch's items of other limiters are taken out before it is
// applied (uncounted.go), so what goes
// are views a reply tells every isolate whatever its batch names: the
// full-window notices (merge/fullnotice.go), key names and counts of
// limiters this token has no business with. A token that may not read
// (list keys: RoleRead) is told no notice at all: the names are other
// clients' keys. rp's entries are copied before any is dropped.
//
// The reset notices (rp.Resets) of limiters p's edge role is not granted
// go too: they name other clients' keys of limiters this token has no
// business with. A token granted a limiter is told the keys of it reset,
// whatever its roles: its isolates must drop what they cached of them.
func (p *principal) grantedViews(rp *wire.Reply) {
	if p == nil || p.limiters == nil && p.may(RoleRead) {
		return
	}
	if p.limiters != nil {
		rp.Resets = kept(rp.Resets, func(r *wire.ResetKey) bool { return p.limiters[r.Limiter] })
		// Limiters paused as a whole: only those granted (a token of one
		// limiter learnt of every other limiter's pause).
		rp.Paused = kept(rp.Paused, func(lp *wire.LimiterPause) bool { return p.limiters[lp.Limiter] })
	}
	rp.Entries = kept(rp.Entries, func(v *wire.View) bool {
		return (p.limiters == nil || p.limiters[v.Limiter]) && (!v.Notice() || p.may(RoleRead))
	})
}
