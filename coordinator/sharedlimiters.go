package coordinator

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// limiterClaimer is a shared store on which the running coordinators
// claim their limiters' shapes (redisstore.Store.ClaimLimiters): one whose
// limiters would read and write the same records in other terms refuses
// to start.
type limiterClaimer interface {
	ClaimLimiters(ctx context.Context, shapes string) error
}

// limiterShapes is cfg's limiters as the shared store compares them, one
// line per limiter sorted by name, "NAME\tSHAPE" (NAME quoted): what decides how a key's
// record is read and written (algorithm, period, burst, and whether it
// holds leases: auto and strict, or counts in place: approximate), not
// its limit or overrides, which may differ for a while (a file reloaded on
// one coordinator) and which the control API changes for all.
func limiterShapes(cfg wire.Config) string {
	lines := make([]string, 0, len(cfg.Limiters))
	for _, l := range cfg.Limiters {
		mode := "approximate"
		if l.Leased() {
			mode = "leased (auto or strict)"
		}
		shape := l.Algorithm + " per " + time.Duration(l.Period).String() + ", " + mode
		if l.Burst != 0 {
			shape += ", burst " + strconv.FormatInt(l.Burst, 10)
		}
		lines = append(lines, strconv.Quote(l.Name)+"\t("+shape+")") // (a quoted name holds no tab)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// claimLimiters claims the shared store for cfg's limiters, when it takes
// claims.
func claimLimiters(store any, cfg wire.Config) error {
	lc, ok := store.(limiterClaimer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lc.ClaimLimiters(ctx, limiterShapes(cfg)); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	return nil
}
