// Package rediscluster starts a Redis Cluster of redis-server processes on
// loopback for tests and benchmarks: each node in its own temporary
// directory, the cluster created with `redis-cli --cluster create`, every
// process stopped by Stop. Nodes can be killed (kill -9) to exercise
// failover.
package rediscluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedis reports that redis-server or redis-cli is not installed.
var ErrNoRedis = errors.New("rediscluster: redis-server or redis-cli not found (make tools installs them from Debian)")

// Options shape a cluster. Zero fields take the defaults.
type Options struct {
	// Masters is the number of masters. Default 3.
	Masters int
	// ReplicasPerMaster is the number of replicas of each master. Default 0.
	ReplicasPerMaster int
	// AppendFsync is the appendfsync policy ("always", "everysec", "no"),
	// with appendonly on; "" means no persistence. Default "".
	AppendFsync string
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica takes over. Default 1s.
	NodeTimeout time.Duration
	// TLSCert and TLSKey (PEM files), when set, make every node serve TLS
	// only, on its client port and its cluster bus, and replicate over
	// TLS; the certificate must be valid for 127.0.0.1 and is what
	// clients trust (ClientTLS). Default: plain TCP.
	TLSCert, TLSKey string
}

// Node is one redis-server process of the cluster.
type Node struct {
	Addr   string // 127.0.0.1:port
	cmd    *exec.Cmd
	args   []string
	dir    string
	dead   bool
	noPing bool // ready once its port accepts connections (TLS, ACL)
}

// Cluster is a running Redis Cluster on loopback.
type Cluster struct {
	Nodes []*Node
	mu    sync.Mutex
	tls   *tls.Config // for clients, when the nodes serve TLS
	ca    string      // the certificate clients trust, when they do
}

// ClientTLS returns the TLS configuration of the cluster's clients (nil
// for a plain TCP cluster).
func (c *Cluster) ClientTLS() *tls.Config { return c.tls }

// client returns a client of the node at addr (TLS when the cluster is).
func (c *Cluster) client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, TLSConfig: c.tls})
}

// Available reports whether redis-server and redis-cli are installed.
func Available() error {
	for _, b := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			return ErrNoRedis
		}
	}
	return nil
}

// freePort returns a loopback port p such that p and p+10000 (the cluster
// bus) are free now.
func freePort() (int, error) {
	for i := 0; i < 200; i++ {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p, nil
	}
	return 0, errors.New("rediscluster: no free port pair")
}

// Start starts the nodes and creates the cluster; it returns once every
// node reports cluster_state:ok. The caller must Stop it.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Masters <= 0 {
		o.Masters = 3
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = time.Second
	}
	c := &Cluster{}
	if o.TLSCert != "" {
		pem, err := os.ReadFile(o.TLSCert)
		if err != nil {
			return nil, fmt.Errorf("rediscluster: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rediscluster: %s: no PEM certificate", o.TLSCert)
		}
		c.tls, c.ca = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, o.TLSCert
	}
	n := o.Masters * (1 + o.ReplicasPerMaster)
	for i := 0; i < n; i++ {
		nd, err := startNode(ctx, o)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	args := []string{"--cluster", "create"}
	if c.ca != "" {
		args = append([]string{"--tls", "--cacert", c.ca}, args...)
	}
	for _, nd := range c.Nodes {
		args = append(args, nd.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(o.ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("rediscluster: redis-cli --cluster create: %w: %s", err, out)
	}
	if err := c.WaitOK(ctx, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.WaitReplicas(ctx, o.ReplicasPerMaster, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func startNode(ctx context.Context, o Options) (*Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "edgelimit-redis-cluster-")
	if err != nil {
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	// repl-diskless-sync-delay 0: a restarted node rejoins as a replica
	// at once rather than after Redis's 5 s (docs/scale-out.md).
	args := []string{"--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--daemonize", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"}
	if o.TLSCert != "" {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", o.TLSCert,
			"--tls-key-file", o.TLSKey, "--tls-auth-clients", "no", "--tls-cluster", "yes", "--tls-replication", "yes",
			"--tls-ca-cert-file", o.TLSCert)
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	if o.AppendFsync != "" {
		args = append(args, "--appendonly", "yes", "--appendfsync", o.AppendFsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	nd := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), args: args, dir: dir, noPing: o.TLSCert != ""}
	if err := nd.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return nd, nil
}

// start runs the node's redis-server and waits until it answers (PING,
// or for a node whose clients need TLS or a user, until its port accepts
// connections).
func (nd *Node) start(ctx context.Context) error {
	cmd := exec.Command("redis-server", nd.args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("rediscluster: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rediscluster: redis-server: %w", err)
	}
	var logMu sync.Mutex
	var tail []string // its last lines, for an error
	go func() {       // drain its log so it never blocks on a full pipe
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			tail = append(tail, sc.Text())
			if len(tail) > 4 {
				tail = tail[1:]
			}
			logMu.Unlock()
		}
	}()
	nd.cmd, nd.dead = cmd, false
	cl := redis.NewClient(&redis.Options{Addr: nd.Addr})
	defer cl.Close()
	ready := func() error { return cl.Ping(ctx).Err() }
	if nd.noPing {
		ready = func() error {
			c, err := net.DialTimeout("tcp", nd.Addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := ready(); err == nil {
			return nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			cmd.Process.Kill()
			cmd.Wait()
			nd.dead = true
			logMu.Lock()
			defer logMu.Unlock()
			return fmt.Errorf("rediscluster: redis-server on %s did not start: %w; its log ends: %s", nd.Addr, err, strings.Join(tail, " | "))
		}
	}
}

func (nd *Node) stop() {
	if nd.cmd.Process != nil && !nd.dead {
		nd.cmd.Process.Kill()
		nd.cmd.Wait()
	}
	nd.dead = true
	os.RemoveAll(nd.dir)
}

// Pid returns the process id of the running node at addr, or 0.
func (c *Cluster) Pid(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		if nd.Addr == addr && !nd.dead && nd.cmd.Process != nil {
			return nd.cmd.Process.Pid
		}
	}
	return 0
}

// Addrs returns the addresses of the nodes still running.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var a []string
	for _, nd := range c.Nodes {
		if !nd.dead {
			a = append(a, nd.Addr)
		}
	}
	return a
}

// WaitOK waits until every running node reports cluster_state:ok and
// knows a master for each of the 16384 slots.
func (c *Cluster) WaitOK(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for _, a := range c.Addrs() {
			cl := c.client(a)
			info, err := cl.ClusterInfo(ctx).Result()
			cl.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				bad = a
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("rediscluster: node %s not in cluster_state:ok after %s", bad, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Masters returns the addresses of the running nodes that are masters.
func (c *Cluster) Masters(ctx context.Context) []string {
	var m []string
	for _, a := range c.Addrs() {
		cl := c.client(a)
		info, err := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err == nil && strings.Contains(info, "role:master") {
			m = append(m, a)
		}
	}
	return m
}

// WaitReplicas waits until every master has n replicas online (replicas
// finish their first synchronisation after the cluster is created, or after
// they rejoin).
func (c *Cluster) WaitReplicas(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		short := ""
		for _, a := range c.Masters(ctx) {
			cl := c.client(a)
			info, err := cl.Info(ctx, "replication").Result()
			cl.Close()
			if err != nil || strings.Count(info, "state=online") < n {
				short = a
				break
			}
		}
		if short == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("rediscluster: master %s has fewer than %d replicas online after %s", short, n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill kills the node at addr with SIGKILL (its data directory stays until
// Stop).
func (c *Cluster) Kill(addr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		if nd.Addr == addr && !nd.dead {
			nd.cmd.Process.Kill()
			nd.cmd.Wait()
			nd.dead = true
			return nil
		}
	}
	return fmt.Errorf("rediscluster: no running node %s", addr)
}

// Restart starts again the killed node at addr, on the same port and
// directory (its nodes.conf): it rejoins the cluster, as a replica of the
// master that took over its slots.
func (c *Cluster) Restart(ctx context.Context, addr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		if nd.Addr == addr && nd.dead {
			return nd.start(ctx)
		}
	}
	return fmt.Errorf("rediscluster: no killed node %s", addr)
}

// ReplicaOf returns the address of a replica of the master at addr, or "".
func (c *Cluster) ReplicaOf(ctx context.Context, addr string) string {
	if r := c.ReplicasOf(ctx, addr); len(r) > 0 {
		return r[0]
	}
	return ""
}

// ReplicasOf returns the addresses of the replicas connected to the master
// at addr (INFO replication).
func (c *Cluster) ReplicasOf(ctx context.Context, addr string) []string {
	cl := c.client(addr)
	defer cl.Close()
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "slave") || strings.TrimLeft(name[len("slave"):], "0123456789") != "" || name == "slave" {
			continue
		}
		var ip, port string
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		if ip != "" && port != "" {
			out = append(out, ip+":"+port)
		}
	}
	return out
}

// IsMaster reports whether the node at addr answers and reports
// role:master.
func (c *Cluster) IsMaster(ctx context.Context, addr string) bool {
	cl := c.client(addr)
	defer cl.Close()
	info, err := cl.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:master")
}

// WaitPromoted waits until the node at addr (a replica whose master
// failed) reports role:master, then until the cluster is ok again.
func (c *Cluster) WaitPromoted(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := c.client(addr)
	defer cl.Close()
	for {
		info, err := cl.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "role:master") {
			return c.WaitOK(ctx, time.Until(deadline))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("rediscluster: %s not promoted to master after %s", addr, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DisconnectReplicas closes the master's connections to its replicas
// (CLIENT KILL TYPE replica): until they reconnect, what the master
// applies reaches no replica.
func (c *Cluster) DisconnectReplicas(ctx context.Context, master string) error {
	cl := c.client(master)
	defer cl.Close()
	if err := cl.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		return fmt.Errorf("rediscluster: client kill on %s: %w", master, err)
	}
	return nil
}

// Signal sends sig to the node at addr (SIGSTOP to freeze it, as a
// replica lagging behind; SIGCONT to let it go on).
func (c *Cluster) Signal(addr string, sig os.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		if nd.Addr == addr && !nd.dead {
			return nd.cmd.Process.Signal(sig)
		}
	}
	return fmt.Errorf("rediscluster: no running node %s", addr)
}

// FlushAll empties every running master.
func (c *Cluster) FlushAll(ctx context.Context) error {
	for _, a := range c.Masters(ctx) {
		cl := c.client(a)
		err := cl.FlushAll(ctx).Err()
		cl.Close()
		if err != nil {
			return fmt.Errorf("rediscluster: flushall %s: %w", a, err)
		}
	}
	return nil
}

// Stop kills every node and removes their directories.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		nd.stop()
	}
}
