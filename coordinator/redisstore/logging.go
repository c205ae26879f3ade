package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clientLog hands go-redis's own messages (a Sentinel's new master, a
// failed dial of the pool) to the store's logger, so that they follow
// --log-format: go-redis writes them as plain text to stderr otherwise,
// in the middle of JSON logs. Its logger is the process's (redis.SetLogger):
// the last store opened sets it.
type clientLog struct{ log *slog.Logger }

// Printf logs one go-redis message at Info, prefixed "redisstore: go-redis:".
func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.log.InfoContext(ctx, "redisstore: go-redis: "+strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// setClientLog routes go-redis's messages to log.
func setClientLog(log *slog.Logger) { redis.SetLogger(clientLog{log}) }
