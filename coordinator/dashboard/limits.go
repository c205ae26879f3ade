package dashboard

import "github.com/edgelimit/edgelimit/wasm/wire"

// SetLimits makes cfg, the running configuration with the limits in force
// (merge.Limits: an operator's change at run time), the configuration the
// dashboard shows and computes usage with. cfg must have the limiters the
// Dashboard was made with, and must not change afterwards.
func (d *Dashboard) SetLimits(cfg wire.Config) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg = cfg
	for i := range cfg.Limiters {
		if l := d.lims[cfg.Limiters[i].Name]; l != nil {
			l.cfg = &cfg.Limiters[i]
		}
	}
}
