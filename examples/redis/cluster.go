package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardwise/shardwise/router"
)

// config is what the example needs to build a router of Redis clients.
type config struct {
	Replicas int
	// Probe settings; zero values mean the router's defaults.
	ProbeInterval, ProbeTimeout time.Duration
	FailureThreshold            int
	Retry                       *router.Retry
	// CommandTimeout bounds each Redis command (dial, read, write).
	CommandTimeout time.Duration
	Logger         *slog.Logger
}

// connect opens a go-redis client for one node and proves it with a PING,
// so an unreachable server fails AddNode (and a reconnect attempt) instead
// of joining the ring. The client's own retries (of commands and of dials)
// are off: the router does the retrying, and a client that retried
// internally would delay failover by its backoff (500 ms with go-redis's
// default of 5 dials 100 ms apart).
func connect(timeout time.Duration) func(ctx context.Context, n router.Node) (*redis.Client, error) {
	return func(ctx context.Context, n router.Node) (*redis.Client, error) {
		c := redis.NewClient(&redis.Options{
			Addr:                  net.JoinHostPort(n.Host, strconv.Itoa(n.Port)),
			DialTimeout:           timeout,
			ReadTimeout:           timeout,
			WriteTimeout:          timeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			PoolSize:              8,
		})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
}

// ping is the health check: a node is healthy when it answers PING.
func ping(ctx context.Context, c *redis.Client, _ router.Node) error {
	return c.Ping(ctx).Err()
}

// notTheNodesFault keeps a missing key (redis.Nil) from marking a node
// down: asking a replica would not help, and the node is fine.
func notTheNodesFault(err error, _ router.Node) bool {
	return !errors.Is(err, redis.Nil)
}

// newRouter builds a router of go-redis clients with PING health checks.
func newRouter(cfg config) (*router.Router[*redis.Client], error) {
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = time.Second
	}
	return router.New(router.Options[*redis.Client]{
		Connect:        connect(cfg.CommandTimeout),
		Disconnect:     func(c *redis.Client, _ router.Node) error { return c.Close() },
		Replicas:       cfg.Replicas,
		Retry:          cfg.Retry,
		ShouldMarkDown: notTheNodesFault,
		Health: &router.Health[*redis.Client]{
			Check:            ping,
			Interval:         cfg.ProbeInterval,
			Timeout:          cfg.ProbeTimeout,
			FailureThreshold: cfg.FailureThreshold,
		},
		Logger: cfg.Logger,
	})
}

// parseNodes reads "host:port[=vnodes],…": the optional vnodes is the
// node's weight (a bigger box gets more).
func parseNodes(spec string) ([]router.Node, error) {
	var nodes []router.Node
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		addr, weight, hasWeight := strings.Cut(part, "=")
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", part, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return nil, fmt.Errorf("node %q: port: %w", part, err)
		}
		n := router.Node{Host: host, Port: port}
		if hasWeight {
			if n.Vnodes, err = strconv.Atoi(weight); err != nil {
				return nil, fmt.Errorf("node %q: vnodes: %w", part, err)
			}
		}
		if err := n.Validate(); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("no nodes given")
	}
	return nodes, nil
}

// write stores key=value on the key's leader and replicas and returns how
// many copies were written.
func write(ctx context.Context, r *router.Router[*redis.Client], key, value string, ttl time.Duration) (int, error) {
	nodes, err := r.ExecuteAll(ctx, key, func(ctx context.Context, c *redis.Client, _ router.Node) error {
		return c.Set(ctx, key, value, ttl).Err()
	})
	return len(nodes), err
}

// read fetches key from its leader, failing over to the replicas.
func read(ctx context.Context, r *router.Router[*redis.Client], key string) (string, error) {
	var value string
	err := r.Execute(ctx, key, func(ctx context.Context, c *redis.Client, _ router.Node) error {
		v, err := c.Get(ctx, key).Result()
		value = v
		return err
	})
	return value, err
}

// writeMany stores every key with its value on the key's leader and
// replicas, with one pipelined round trip per node (SET with a TTL for each
// key the node holds; MSET has no TTL). It returns each key's copy count.
func writeMany(ctx context.Context, r *router.Router[*redis.Client], values map[string]string, ttl time.Duration) ([]int, error) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	return router.ExecuteAllMulti(ctx, r, keys, func(ctx context.Context, c *redis.Client, _ router.Node, keys []string) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Set(ctx, k, values[k], ttl)
			}
			return nil
		})
		return err
	})
}

// readMany fetches keys with one MGET per leader, failing over per node. A
// missing key reads as "" with ok false.
func readMany(ctx context.Context, r *router.Router[*redis.Client], keys []string) (values []string, ok []bool, err error) {
	type got struct {
		v  string
		ok bool
	}
	res, err := router.ExecuteMulti(ctx, r, keys, func(ctx context.Context, c *redis.Client, _ router.Node, keys []string, out []got) error {
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return err
		}
		for j, v := range vals {
			if s, isString := v.(string); isString {
				out[j] = got{s, true}
			}
		}
		return nil
	})
	values, ok = make([]string, len(res)), make([]bool, len(res))
	for i, g := range res {
		values[i], ok[i] = g.v, g.ok
	}
	return values, ok, err
}
