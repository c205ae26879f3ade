package benchmarks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The peers users would otherwise pick for a global limit: a central
// limiter that asks Redis on every decision. Two shapes are measured, both
// one loopback round trip per decision: a fixed window as INCR + EXPIRE in
// one pipeline, and GCRA in a Lua script (the shape of redis_rate). The
// benchmark starts its own redis-server on loopback (`make tools` installs
// it from Debian) and skips with a message when there is none.

// ErrNoRedis reports that redis-server is not installed.
var ErrNoRedis = errors.New("benchmarks: redis-server not found (make tools installs it)")

// Redis is a redis-server process on loopback, started for a measurement.
type Redis struct {
	Addr   string
	Client *redis.Client
	cmd    *exec.Cmd
	dir    string
}

// StartRedis starts redis-server on a free loopback port with its data in
// a temporary directory. appendfsync is "" (no persistence), "everysec" or
// "always". Stop it with Stop.
func StartRedis(ctx context.Context, appendfsync string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("benchmarks: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "edgelimit-redis-")
	if err != nil {
		return nil, fmt.Errorf("benchmarks: %w", err)
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no"}
	if appendfsync != "" {
		args = append(args, "--appendonly", "yes", "--appendfsync", appendfsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("benchmarks: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("benchmarks: redis-server: %w", err)
	}
	go func() { // drain its log so it never blocks on a full pipe
		sc := bufio.NewScanner(out)
		for sc.Scan() {
		}
	}()
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := r.Client.Ping(ctx).Err(); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("benchmarks: redis-server did not answer: %w", err)
		}
	}
}

// Stop stops the server and removes its data.
func (r *Redis) Stop() {
	r.Client.Close()
	r.cmd.Process.Kill()
	r.cmd.Wait()
	os.RemoveAll(r.dir)
}

// RedisFixedWindow decides one request of cost 1 against limit per period
// by INCR and EXPIRE of the window's key in one pipeline (one round trip).
func RedisFixedWindow(ctx context.Context, c *redis.Client, key string, limit int64, period time.Duration, now time.Time) (bool, error) {
	w := now.UnixNano() / int64(period)
	k := key + ":" + strconv.FormatInt(w, 10)
	p := c.Pipeline()
	incr := p.Incr(ctx, k)
	p.PExpire(ctx, k, 2*period)
	if _, err := p.Exec(ctx); err != nil {
		return false, fmt.Errorf("benchmarks: redis: %w", err)
	}
	return incr.Val() <= limit, nil
}

// gcraScript keeps a key's theoretical arrival time (ns) and admits one
// request if it fits the burst: ARGV now, emission interval, burst
// tolerance (ns). It returns 1 when admitted.
var gcraScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local t = tonumber(ARGV[2])
local tol = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + t
if new - now > tol then return 0 end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1e6) + 1)
return 1
`)

// RedisGCRA decides one request against a GCRA of limit per period and a
// burst of burst in a Lua script (one round trip).
func RedisGCRA(ctx context.Context, c *redis.Client, key string, limit, burst int64, period time.Duration, now time.Time) (bool, error) {
	t := int64(period) / limit
	v, err := gcraScript.Run(ctx, c, []string{key}, now.UnixNano(), t, burst*t).Int()
	if err != nil {
		return false, fmt.Errorf("benchmarks: redis: %w", err)
	}
	return v == 1, nil
}

func redisBench(b *testing.B, decide func(context.Context, *redis.Client, int) (bool, error)) {
	ctx := context.Background()
	r, err := StartRedis(ctx, "")
	if errors.Is(err, ErrNoRedis) {
		b.Skip(err.Error())
	}
	if err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := decide(ctx, r.Client, i); err != nil {
			b.Fatal(err)
		}
	}
}

func redisFixedWindowBench(b *testing.B) {
	redisBench(b, func(ctx context.Context, c *redis.Client, i int) (bool, error) {
		return RedisFixedWindow(ctx, c, "customer-0", 1<<40, time.Minute, time.Unix(0, int64(i)))
	})
}

func redisGCRABench(b *testing.B) {
	redisBench(b, func(ctx context.Context, c *redis.Client, i int) (bool, error) {
		return RedisGCRA(ctx, c, "customer-0", 1<<30, 1<<30, time.Second, time.Unix(0, int64(i)))
	})
}
