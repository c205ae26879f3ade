package host

// uncounted logs, once per list, that the coordinator does not count the
// limiters named (syncloop.HTTPTransport.Uncounted): the token is not
// granted them, or the coordinator does not run them. Their cost is
// decided here and never reaches the coordinator; the rest of each batch
// is counted.
func (h *Host) uncounted(limiters string) {
	if _, seen := h.told.LoadOrStore(limiters, true); !seen {
		h.opts.Logger.Warn("host: the coordinator does not count these limiters (not granted to this token, or not in its configuration); the rest is counted",
			"limiters", limiters)
	}
}
