package coordinator

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MsgpackContentType is the media type of sync requests and replies.
const MsgpackContentType = "application/msgpack"

// Handler returns the HTTP API:
//
//	POST   /v1/sync                          body: wire.Batch (msgpack); reply: wire.Reply (msgpack)
//	GET    /v1/limiters/{name}/keys/{key}    current state of a key (JSON KeyState)
//	DELETE /v1/limiters/{name}/keys/{key}    reset a key (204)
//	POST   /v1/limiters/{name}/keys/{key}    pause a key fleet-wide (JSON PauseRequest; pause.go)
//	                                         (each: ?encoding=base64url takes {key} as the key's bytes in base64url)
//	GET    /v1/control, PUT .../limit, .../overrides/{key}, POST/DELETE .../pause[/{key}]   live control (control_http.go)
//	GET    /healthz                          200 "ok", 503 while commits fail or the store reports background errors
//	GET    /metrics                          Prometheus metrics (read role)
//	GET    /ui, /v1/limiters, /v1/limiters/{name}/keys, /v1/isolates   the dashboard (package dashboard)
//
// /v1/* require "Authorization: Bearer TOKEN" when Options.Tokens or
// Options.Grants is set, and the token's role (roles.go: edge for sync,
// read for the GETs, admin for DELETE and POST; 403 forbidden otherwise); each token
// is its own namespace of isolate ids (scope.go), and a key's view shows
// the caller's isolates only.
// Errors are problem+json (RFC 9457) with an extra "field" member naming
// the offending field ("body", "v", "e", "e[3].limiter", ...). A sync
// batch whose sequence number is neither the isolate's next nor a retry of
// its last is answered 409 with the type urn:edgelimit:problem:seq_stale,
// seq_gap or seq_conflict (field "seq"; see sequence.go), and one without
// the secret its isolate id is bound to 409 seq_identity (field "sec", no
// sequence number told; merge/sequence.go); a time or window
// ahead of the clock 400 with urn:edgelimit:problem:clock_skew (times.go).
// A successful reply carries Edgelimit-Stale-Entries: N when N entries were
// dropped as older than their key's previous window, and
// Edgelimit-Uncounted: a,b when items of limiters a and b were taken out
// of the batch, not counted: limiters the token's edge role is not granted
// or the coordinator does not run (uncounted.go; a name's bytes outside
// printable ASCII, commas and percent signs percent-encoded); the rest is
// applied. Every answer carries
// Edgelimit-Time (clock.Header), the coordinator's time in ns, which edge
// hosts run on (clock.Offset).
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/sync", c.auth(RoleEdge, http.HandlerFunc(c.handleSync)))
	mux.Handle("GET /v1/limiters/{name}/keys/{key...}", c.auth(RoleRead, http.HandlerFunc(c.handleGetKey)))
	mux.Handle("DELETE /v1/limiters/{name}/keys/{key...}", c.auth(RoleAdmin, http.HandlerFunc(c.handleDeleteKey)))
	mux.Handle("POST /v1/limiters/{name}/keys/{key...}", c.auth(RoleAdmin, http.HandlerFunc(c.handlePause)))
	c.controlRoutes(mux) // live control: limits, overrides, fleet pauses (control_http.go)
	c.dash.Routes(mux, dashSource{c}, func(h http.Handler) http.Handler { return c.auth(RoleRead, h) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := c.healthy(); err != nil {
			http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	// The metrics name the limiters and their totals, as GET /v1/limiters
	// does: the read role (before, any client could read them).
	mux.Handle("GET /metrics", c.auth(RoleRead, promhttp.HandlerFor(c.met.reg, promhttp.HandlerOpts{})))
	h := c.sameOrigin(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(clock.Header, strconv.FormatInt(c.opts.Clock.Now(), 10))
		h.ServeHTTP(w, r)
	})
}

// sameOrigin refuses the changes (POST, PUT, DELETE) a browser sends from
// another site (http.CrossOriginProtection: Sec-Fetch-Site, or Origin
// against Host) with a 403 problem. A coordinator without tokens (on
// loopback) has no other defence against a web page its operator opens:
// a cross-site POST with a text/plain body needs no preflight, and would
// pause a limiter for 30 days. Clients that are not browsers send neither
// header and pass, as does the dashboard (same origin); POST /v1/sync,
// whose msgpack body a page cannot send without a preflight, is left out.
func (c *Coordinator) sameOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.AddInsecureBypassPattern("POST /v1/sync")
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, http.StatusForbidden, "forbidden", "Origin", "Cross-origin request refused",
			r.Method+" "+r.URL.Path+" from a page of another site is refused (a browser's cross-origin request)")
	}))
	return cop.Handler(h)
}

// Serve serves Handler on ln until ctx ends, then shuts down gracefully:
// it stops accepting, waits (up to 30s) for in-flight requests, whose
// commits complete, and returns. The caller closes the Coordinator. On a
// loopback ln, Host headers other than loopback ones and
// Options.AllowedHosts are refused 403 (hostguard.go).
func (c *Coordinator) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: c.guardHost(ln, c.Handler()), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: serverReadTimeout, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(errors.New("coordinator: shutdown"), err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// errorKinds label request_errors_total.
var errorKinds = []string{"auth", "content_type", "too_large", "malformed", "version",
	"too_many_entries", "unknown_limiter", "invalid", "clock_skew", "seq_stale", "seq_gap", "seq_conflict", "seq_identity",
	"unavailable", "internal", "not_found", "forbidden", "not_supported", "busy"}

// problem is an RFC 9457 problem details body with the offending field.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field,omitempty"`
}

func (c *Coordinator) fail(w http.ResponseWriter, status int, kind, field, title, detail string) {
	c.met.errors.WithLabelValues(kind).Inc()
	b, _ := json.Marshal(problem{Type: "urn:edgelimit:problem:" + kind, Title: title, Status: status,
		Detail: detail, Field: field})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// failErr maps an error of decoding or Sync to a response.
func (c *Coordinator) failErr(w http.ResponseWriter, err error) {
	var fe *wire.FieldError
	var mbe *http.MaxBytesError
	var se *merge.SeqError
	var qe *QuotaError
	switch {
	case errors.As(err, &qe):
		left := qe.Until.UnixNano() - c.opts.Clock.Now()
		w.Header().Set("Retry-After", strconv.FormatInt(max((left+int64(time.Second)-1)/int64(time.Second), 1), 10))
		c.fail(w, http.StatusTooManyRequests, "quota", "", "Token over its quota", qe.Error())
	case errors.As(err, &se) && se.Anomaly == merge.SeqIdentity:
		c.fail(w, http.StatusConflict, "seq_identity", "sec", "Batch of another incarnation", se.Error())
	case errors.As(err, &se):
		c.fail(w, http.StatusConflict, "seq_"+string(se.Anomaly), "seq", "Batch out of sequence", se.Error())
	case errors.As(err, &mbe):
		c.fail(w, http.StatusRequestEntityTooLarge, "too_large", "body", "Request body too large",
			"the body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
	case errors.As(err, &fe):
		kind := "invalid"
		switch {
		case fe.Field == "v":
			kind = "version"
		case fe.Field == "e" && strings.Contains(fe.Err.Error(), "more than"):
			kind = "too_many_entries"
		case strings.HasSuffix(fe.Field, ".limiter") && strings.HasPrefix(fe.Err.Error(), "unknown limiter"):
			kind = "unknown_limiter"
		case errors.Is(fe.Err, merge.ErrClockSkew):
			kind = "clock_skew"
		}
		c.fail(w, http.StatusBadRequest, kind, fe.Field, "Invalid sync batch", fe.Error())
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		c.fail(w, http.StatusServiceUnavailable, "unavailable", "", "Coordinator unavailable", err.Error())
	case errors.Is(err, merge.ErrUnknownLimiter):
		c.fail(w, http.StatusNotFound, "not_found", "name", "Unknown limiter", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		c.fail(w, http.StatusServiceUnavailable, "unavailable", "", "Request cancelled", err.Error())
	default:
		c.fail(w, http.StatusInternalServerError, "internal", "", "Internal error", err.Error())
	}
}

// authenticated reports whether the coordinator requires bearer tokens.
func (c *Coordinator) authenticated() bool { return len(c.opts.Tokens)+len(c.opts.Grants) > 0 }

// principals returns the tokens the coordinator accepts and, at the same
// index, what each may do (roles.go).
func (c *Coordinator) principals() ([][]byte, []*principal) {
	var tokens [][]byte
	var ps []*principal
	for _, t := range c.opts.Tokens {
		tokens = append(tokens, []byte(t))
		ps = append(ps, &principal{scope: tokenScope(t), roles: RoleAll})
	}
	for _, g := range c.opts.Grants {
		p := &principal{scope: tokenScope(g.Token), roles: g.Roles}
		if g.Roles&RoleEdge != 0 && len(g.Limiters) > 0 {
			p.limiters = map[string]bool{}
			for _, l := range g.Limiters {
				p.limiters[l] = true
			}
		}
		tokens = append(tokens, []byte(g.Token))
		ps = append(ps, p)
	}
	return tokens, ps
}

// auth requires a configured bearer token (compared in constant time)
// whose roles hold role, and puts the token's principal (its isolate
// namespace and roles: scope.go, roles.go) in the request's context. A
// missing or unknown token is 401; a known one without role 403
// (urn:edgelimit:problem:forbidden, naming the role missing).
func (c *Coordinator) auth(role Role, next http.Handler) http.Handler {
	if !c.authenticated() {
		return next
	}
	tokens, ps := c.principals()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		match := -1
		for i, t := range tokens {
			if subtle.ConstantTimeCompare([]byte(got), t) == 1 {
				match = i
			}
		}
		if !ok || match < 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgelimit"`)
			c.fail(w, http.StatusUnauthorized, "auth", "Authorization", "Unauthorized",
				"a valid bearer token is required")
			return
		}
		p := ps[match]
		if !p.may(role) {
			c.fail(w, http.StatusForbidden, "forbidden", "Authorization", "Forbidden",
				"this token lacks the "+role.String()+" role, which "+r.Method+" "+r.URL.Path+" needs (it has "+p.roles.String()+")")
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// bearer returns the token of an Authorization value of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 11.1: "bearer x" was
// a 401), with the spaces around the token trimmed.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// DecodeBatch decodes and validates a sync request body, as POST /v1/sync
// does before applying it. Errors are *wire.FieldError naming the field
// ("body" when the msgpack itself is malformed).
func DecodeBatch(body []byte) (*wire.Batch, error) {
	b := new(wire.Batch)
	if err := b.UnmarshalMsg(body); err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, &wire.FieldError{Field: "body", Err: err}
	}
	return b, nil
}

func (c *Coordinator) handleSync(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil ||
		(mt != MsgpackContentType && mt != "application/x-msgpack") {
		c.fail(w, http.StatusUnsupportedMediaType, "content_type", "Content-Type", "Unsupported media type",
			"POST /v1/sync takes "+MsgpackContentType)
		return
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// A compressed body would read as malformed msgpack (400): say
		// what is wrong instead (RFC 9110 15.5.16, RFC 7694).
		w.Header().Set("Accept-Encoding", "identity")
		c.fail(w, http.StatusUnsupportedMediaType, "content_encoding", "Content-Encoding", "Unsupported content coding",
			"POST /v1/sync takes an uncompressed body; got Content-Encoding "+strconv.Quote(ce))
		return
	}
	if r.ContentLength > c.opts.MaxBodyBytes {
		c.failErr(w, &http.MaxBytesError{Limit: c.opts.MaxBodyBytes})
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			bufPool.Put(buf)
		}
	}()
	paced := pacedBody(w, r.Body) // bodyrate.go
	body := c.bodies.reader(http.MaxBytesReader(w, paced, c.opts.MaxBodyBytes), scopeOf(r.Context()))
	defer body.release() // after the reply is written from buf (bodybudget.go), within its pace (writeReply)
	_, err := buf.ReadFrom(body)
	paced.done()
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			c.failErr(w, err)
		case errors.Is(err, errBodyBudget):
			c.fail(w, http.StatusServiceUnavailable, "busy", "body", "Coordinator busy",
				"the request bodies being read hold the memory allowed for them (this token's share of it, with tokens); resend the batch")
		case errors.Is(err, errBodyTooSlow):
			w.Header().Set("Connection", "close")
			c.fail(w, http.StatusRequestTimeout, "slow_body", "body", "Request body too slow", err.Error())
		default:
			c.fail(w, http.StatusBadRequest, "malformed", "body", "Unreadable body", err.Error())
		}
		return
	}
	if c.refuseVersion(w, buf.Bytes()) {
		return
	}
	b, err := DecodeBatch(buf.Bytes())
	if err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) && fe.Field == "body" {
			c.fail(w, http.StatusBadRequest, "malformed", "body", "Malformed msgpack", fe.Error())
			return
		}
		c.failErr(w, err)
		return
	}
	p := principalOf(r.Context())
	other := c.periodMismatches(b)
	names, reasons, byReason := stripUncounted(b, func(l string) string { return c.uncounted(p, l, other) })
	if names != nil {
		c.noteUncounted(scopeOf(r.Context()), b.Isolate, names, reasons, byReason)
		w.Header().Set("Edgelimit-Uncounted", headerNames(names))
	}
	rq, err := c.sync(r.Context(), b)
	if err != nil {
		c.failErr(w, err)
		return
	}
	p.grantedViews(rq.reply)
	buf.Reset()
	out := rq.reply.AppendMsg(buf.AvailableBuffer())
	if rq.stale > 0 {
		w.Header().Set("Edgelimit-Stale-Entries", strconv.FormatInt(rq.stale, 10))
	}
	w.Header().Set("Content-Type", MsgpackContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	writeReply(w, out) // bodyrate.go
}

// pathKey returns the key of a /v1/limiters/{name}/keys/{key} request: the
// path segment as text, or, with ?encoding=base64url, the bytes it encodes
// (unpadded or padded base64url: any key, whatever its bytes, as the
// dashboard sends it). It answers 400 itself and returns false when the
// key is not 1 to wire.MaxKeyLen bytes or not base64url.
func (c *Coordinator) pathKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.PathValue("key")
	switch enc := r.URL.Query().Get("encoding"); enc {
	case "":
	case "base64url":
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(key, "="))
		if err != nil {
			c.fail(w, http.StatusBadRequest, "invalid", "key", "Invalid key", "the key is not base64url: "+err.Error())
			return "", false
		}
		key = string(b)
	default:
		c.fail(w, http.StatusBadRequest, "invalid", "encoding", "Invalid key encoding",
			"encoding must be base64url or absent (the key as text), got "+strconv.Quote(enc))
		return "", false
	}
	if key == "" || len(key) > wire.MaxKeyLen {
		c.fail(w, http.StatusBadRequest, "invalid", "key", "Invalid key",
			"keys are 1 to "+strconv.Itoa(wire.MaxKeyLen)+" bytes")
		return "", false
	}
	return key, true
}

func (c *Coordinator) handleGetKey(w http.ResponseWriter, r *http.Request) {
	key, ok := c.pathKey(w, r)
	if !ok {
		return
	}
	ks, err := c.KeyState(r.Context(), r.PathValue("name"), key)
	if err != nil {
		c.failErr(w, err)
		return
	}
	// Other tokens' isolates are not the caller's business (scope.go).
	scope := scopeOf(r.Context())
	ks.Leases = ownIsolates(ks.Leases, scope)
	if u := ks.Upstream; u != nil && u.Probe != "" {
		probe, ok := strings.CutPrefix(u.Probe, scope)
		if !ok {
			probe = "(another token's isolate)"
		}
		u.Probe = probe
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(keyView{ks, c.ctl.pauseOf(ks.Limiter, ks.Key, c.opts.Clock.Now())})
}

// keyView is the JSON of GET /v1/limiters/{name}/keys/{key}: the key's
// state and the fleet pause of its limiter or of it in force (control.go).
type keyView struct {
	*merge.KeyState
	FleetPause *Pause `json:"fleet_pause,omitempty"`
}

func (c *Coordinator) handleDeleteKey(w http.ResponseWriter, r *http.Request) {
	key, ok := c.pathKey(w, r)
	if !ok {
		return
	}
	if err := c.ResetKey(r.Context(), r.PathValue("name"), key); err != nil {
		c.failErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
