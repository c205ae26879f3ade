package coordinator

import (
	"net/http"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// dashSource is what the dashboard (package dashboard) reads from c.
type dashSource struct{ c *Coordinator }

var _ dashboard.Source = dashSource{}

func (s dashSource) Now() int64     { return s.c.opts.Clock.Now() }
func (s dashSource) Healthy() error { return s.c.healthy() }

func (s dashSource) CachedKeys() (n int) {
	s.c.withMerger(func(m *merge.Merger) { n = m.CachedKeys() })
	return n
}

func (s dashSource) Scope(r *http.Request) (string, bool) {
	return scopeOf(r.Context()), s.c.authenticated()
}

func (s dashSource) Fail(w http.ResponseWriter, status int, kind, field, title, detail string) {
	s.c.fail(w, status, kind, field, title, detail)
}
