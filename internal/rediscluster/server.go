package rediscluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Standalone servers and Sentinels, for the tests of the store's other
// modes (one redis-server; a master with replicas under Sentinel; TLS and
// ACL users).

// ServerOptions shape one standalone redis-server. Zero fields take the
// defaults.
type ServerOptions struct {
	// TLSCert and TLSKey (PEM files), when set, make it serve TLS only (no
	// plain port; clients are not asked for certificates). Default: plain
	// TCP.
	TLSCert, TLSKey string
	// Users are ACL rules, one user each (e.g. "edgelimit on >secret ~*
	// &* +@all"); when given, the default user is turned off. Default: the
	// default user, no password.
	Users []string
	// ReplicaOf makes it a replica of the server at this address.
	ReplicaOf string
}

// StartServer starts one redis-server on loopback (not in cluster mode).
// The caller must Stop it.
func StartServer(ctx context.Context, o ServerOptions) (*Node, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "edgelimit-redis-")
	if err != nil {
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	args := []string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--protected-mode", "no"}
	if o.TLSCert != "" {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", o.TLSCert,
			"--tls-key-file", o.TLSKey, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	for _, u := range o.Users {
		args = append(append(args, "--user"), strings.Fields(u)...)
	}
	if len(o.Users) > 0 {
		args = append(args, "--user", "default", "off")
	}
	if o.ReplicaOf != "" {
		h, p, err := splitAddr(o.ReplicaOf)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, "--replicaof", h, p)
	}
	nd := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), args: args, dir: dir,
		noPing: o.TLSCert != "" || len(o.Users) > 0}
	if err := nd.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return nd, nil
}

// StartSentinel starts a Sentinel on loopback watching the master at
// master under name, with a quorum of 1, which fails it over once it has
// not answered for downAfter. The caller must Stop it.
func StartSentinel(ctx context.Context, name, master string, downAfter time.Duration) (*Node, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	h, p, err := splitAddr(master)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "edgelimit-redis-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	ms := strconv.FormatInt(downAfter.Milliseconds(), 10)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
		"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s %s\nsentinel failover-timeout %s %d\n",
		port, dir, name, h, p, name, ms, name, 2*downAfter.Milliseconds())
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	nd := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), args: []string{path, "--sentinel"}, dir: dir}
	if err := nd.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return nd, nil
}

// Kill kills the node with SIGKILL.
func (nd *Node) Kill() {
	if nd.cmd.Process != nil && !nd.dead {
		nd.cmd.Process.Kill()
		nd.cmd.Wait()
	}
	nd.dead = true
}

// Signal sends sig to the node's process (SIGSTOP hangs it, SIGCONT
// resumes it).
func (nd *Node) Signal(sig os.Signal) error {
	if nd.cmd == nil || nd.cmd.Process == nil || nd.dead {
		return fmt.Errorf("rediscluster: %s is not running", nd.Addr)
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("rediscluster: signal %s: %w", nd.Addr, err)
	}
	return nil
}

// Stop kills the node and removes its directory.
func (nd *Node) Stop() { nd.stop() }

func splitAddr(a string) (host, port string, err error) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("rediscluster: address %q: want HOST:PORT", a)
}
