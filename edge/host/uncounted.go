package host

// maxToldUncounted bounds the limiter lists uncounted says and keeps: a
// coordinator (or something in its place) naming another list with every
// reply filled the log and the memory (556 lines of 60 KB and 44 MB more
// in 30 s). Each list is also cut to maxUncountedLen bytes.
const (
	maxToldUncounted = 16
	maxUncountedLen  = 512
)

// uncounted logs, once per list, that the coordinator does not count the
// limiters named (syncloop.HTTPTransport.Uncounted): the token is not
// granted them, or the coordinator does not run them. Their cost is
// decided here and never reaches the coordinator; the rest of each batch
// is counted. Past maxToldUncounted lists it says once that it says no
// more.
func (h *Host) uncounted(limiters string) {
	if len(limiters) > maxUncountedLen {
		limiters = limiters[:maxUncountedLen] + "..."
	}
	h.toldMu.Lock()
	defer h.toldMu.Unlock()
	if h.told[limiters] || len(h.told) > maxToldUncounted {
		return
	}
	if h.told == nil {
		h.told = map[string]bool{}
	}
	h.told[limiters] = true
	if len(h.told) > maxToldUncounted {
		h.opts.Logger.Warn("host: the coordinator named more lists of limiters it does not count; no more are said", "lists", maxToldUncounted)
		return
	}
	h.opts.Logger.Warn("host: the coordinator does not count these limiters (not granted to this token, not in its configuration, or run there with another period); the rest is counted",
		"limiters", limiters)
}
