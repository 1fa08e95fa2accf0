package redisdir_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/directory/dirtest"
	"github.com/shardwise/shardwise/directory/redisdir"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
)

func newClient(t testing.TB, srv *testenv.RedisServer) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         srv.Addr,
		MaxRetries:   -1, // a dead server must surface at once in these tests
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var prefixSeq atomic.Int64

func newDir(t testing.TB, c redis.UniversalClient, ttl time.Duration) *redisdir.Directory {
	t.Helper()
	d, err := redisdir.New(redisdir.Config{
		Client:    c,
		KeyPrefix: fmt.Sprintf("test%d:", prefixSeq.Add(1)),
		LeaseTTL:  ttl,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitGone polls until key no longer exists in Redis, by Redis's own expiry.
func waitGone(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", key, err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after 10s", key)
		}
		select {
		case <-time.After(5 * time.Millisecond): // polling interval, not synchronisation
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

func TestContract(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv)
	dirtest.Run(t, func(t *testing.T) (directory.Directory, dirtest.Controls) {
		d := newDir(t, c, time.Minute)
		return d, dirtest.Controls{
			// Cut the real TTL short and let Redis expire the key itself.
			Expire: func(t *testing.T, account account.ID) {
				if err := c.PExpire(context.Background(), d.SessionKey(account), time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
				waitGone(t, c, d.SessionKey(account))
			},
			ExpireResume: func(t *testing.T, account account.ID) {
				if err := c.PExpire(context.Background(), d.ResumeKey(account), time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
				waitGone(t, c, d.ResumeKey(account))
			},
			Now: time.Now,
		}
	})
}

// The configured TTL is the one Redis applies: a session that is not
// renewed disappears after LeaseTTL, one that is renewed stays.
func TestLeaseTTLIsReal(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv)
	const ttl = 3 * time.Second
	d := newDir(t, c, ttl)
	ctx := t.Context()
	before := time.Now()
	s, _, err := d.Connect(ctx, 1, 1)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	pttl, err := c.PTTL(ctx, d.SessionKey(1)).Result()
	if err != nil || pttl <= 0 || pttl > ttl {
		t.Fatalf("PTTL after Connect = %v, %v; want in (0, %v]", pttl, err, ttl)
	}
	// Bracketed by the times measured around the call rather than by a
	// tolerance on "now", so a stalled machine cannot fail it. Redis runs on
	// this host (same clock); the expiry is in whole milliseconds.
	lo, hi := before.Add(ttl-time.Millisecond), after.Add(ttl+time.Millisecond)
	if s.LeaseExpiry.Before(lo) || s.LeaseExpiry.After(hi) {
		t.Fatalf("lease expiry %v not within [%v, %v]: Connect time + LeaseTTL", s.LeaseExpiry, lo, hi)
	}
	waitGone(t, c, d.SessionKey(1))
	if _, err := d.Lookup(ctx, 1); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Lookup after the TTL: %v", err)
	}
	if pttl, err := c.PTTL(ctx, d.CountersKey(1)).Result(); err != nil || pttl < time.Hour {
		t.Fatalf("counters key PTTL = %v, %v; want the 24h retention", pttl, err)
	}
}

// Killing Redis turns every call into an error with DIRECTORY.UNAVAILABLE,
// never a success or a stale answer. After a restart the data is gone
// (persistence is off): sessions read as not found, old epochs are refused
// as not found, and new epochs are still above every old one because of
// the time floor.
func TestRedisKillAndRestart(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv)
	d := newDir(t, c, time.Minute)
	ctx := t.Context()
	var last directory.Session
	for range 5 {
		s, _, err := d.Connect(ctx, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		last = s
	}
	if _, err := d.SetMaster(ctx, 1, last.Epoch, directory.Route{Node: 3, Version: 7}); err != nil {
		t.Fatal(err)
	}
	if err := d.ClaimToken(ctx, logintoken.ID{9}, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	wantUnavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, directory.ErrUnavailable) || errcode.Of(err) != directory.CodeUnavailable {
			t.Fatalf("%s with Redis down: err = %v (code %q), want DIRECTORY.UNAVAILABLE", what, err, errcode.Of(err))
		}
		var ue *directory.UnavailableError
		if !errors.As(err, &ue) || ue.Err == nil {
			t.Fatalf("%s: no *UnavailableError with a cause: %v", what, err)
		}
	}
	_, _, err := d.Connect(ctx, 1, 2)
	wantUnavailable("Connect", err)
	_, err = d.Renew(ctx, 1, last.Epoch)
	wantUnavailable("Renew", err)
	_, err = d.SetMaster(ctx, 1, last.Epoch, directory.Route{Node: 3, Version: 8})
	wantUnavailable("SetMaster", err)
	_, err = d.Lookup(ctx, 1)
	wantUnavailable("Lookup", err)
	wantUnavailable("Release", d.Release(ctx, 1, last.Epoch))
	// A token cannot be checked: it must be refused, not let through.
	wantUnavailable("ClaimToken", d.ClaimToken(ctx, logintoken.ID{10}, time.Now().Add(time.Minute)))

	srv.Restart(t)
	_, err = d.Lookup(ctx, 1)
	if !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Lookup after restart: %v, want not found (data lost)", err)
	}
	_, err = d.Renew(ctx, 1, last.Epoch)
	if !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Renew of the pre-restart epoch: %v, want not found", err)
	}
	s, prev, err := d.Connect(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if prev.Epoch != 0 {
		t.Fatalf("a session survived the restart: %+v", prev)
	}
	if s.Epoch <= last.Epoch {
		t.Fatalf("epoch after data loss %d not above the last one before %d", s.Epoch, last.Epoch)
	}
	// Lost with the data: the route floor, and the used-token record. A
	// token used before the loss can be used once more; see
	// the directory section of docs/decisions.md ("Redis data loss").
	if s.Master.Version != 0 {
		t.Fatalf("route floor survived a data loss? %+v", s)
	}
	if err := d.ClaimToken(ctx, logintoken.ID{9}, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("claim after data loss: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		cfg   redisdir.Config
		field string
	}{
		{redisdir.Config{}, "Client"},
		{redisdir.Config{Client: c, KeyPrefix: "a{b"}, "KeyPrefix"},
		{redisdir.Config{Client: c, LeaseTTL: 1500 * time.Microsecond}, "LeaseTTL"},
		{redisdir.Config{Client: c, LeaseTTL: -time.Second}, "LeaseTTL"},
		{redisdir.Config{Client: c, LeaseTTL: time.Hour, CounterRetention: time.Minute}, "CounterRetention"},
	} {
		err := tc.cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.Is(err, errcode.ErrConfigInvalid) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("Validate(%+v) = %v, want a config error on %s", tc.cfg, err, tc.field)
		}
	}
	if err := (redisdir.Config{Client: c}).Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

// Two nodes, each with its own Redis connection and verifier, share the
// single-use record: a token used on one is refused on the other.
func TestTokenReplayedOnAnotherNode(t *testing.T) {
	srv := testenv.StartRedis(t)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "c1", Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	node := func() *logintoken.Verifier {
		d, err := redisdir.New(redisdir.Config{Client: newClient(t, srv), KeyPrefix: "shared:"})
		if err != nil {
			t.Fatal(err)
		}
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: "c1", Audience: "gateway",
			Keys: []ed25519.PublicKey{pub}, SingleUse: d})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := node(), node()
	tok, _, err := issuer.Issue(1001, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(t.Context(), tok); err != nil {
		t.Fatalf("node a: %v", err)
	}
	_, err = b.Verify(t.Context(), tok)
	if !errors.Is(err, logintoken.ErrReplayed) || errcode.Of(err) != logintoken.CodeReplayed {
		t.Fatalf("node b: %v, want TOKEN.REPLAYED", err)
	}
}

// If the counters key is lost while the session lives (evicted, or outlived
// by a session renewed past CounterRetention), Renew writes the session's
// epoch and route version back, so neither floor drops.
func TestRenewRebuildsLostCounters(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv)
	d := newDir(t, c, time.Minute)
	ctx := t.Context()
	s, _, err := d.Connect(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SetMaster(ctx, 1, s.Epoch, directory.Route{Node: 4, Version: 9}); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, d.CountersKey(1), time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, d.CountersKey(1))
	if _, err := d.Renew(ctx, 1, s.Epoch); err != nil {
		t.Fatal(err)
	}
	got, err := c.HMGet(ctx, d.CountersKey(1), "e", "r").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != strconv.FormatUint(uint64(s.Epoch), 10) || got[1] != "9" {
		t.Fatalf("counters after Renew = %v, want epoch %d and route 9", got, s.Epoch)
	}
	if err := d.Release(ctx, 1, s.Epoch); err != nil {
		t.Fatal(err)
	}
	s2, _, err := d.Connect(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Epoch <= s.Epoch || s2.Master.Version != 9 {
		t.Fatalf("session after release = %+v, want epoch above %d and route floor 9", s2, s.Epoch)
	}
}

// A renewal gives the armed resume credential its window again (the key's
// TTL), and Resume spends it (the key is gone).
func TestRenewRestartsTheResumeWindow(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv)
	d := newDir(t, c, time.Minute)
	ctx := context.Background()
	s, _, err := d.Connect(ctx, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ArmResume(ctx, 9, s.Epoch, directory.ResumeHash{1}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, d.ResumeKey(9), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Renew(ctx, 9, s.Epoch); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, d.ResumeKey(9)).Val(); ttl < 59*time.Minute {
		t.Fatalf("resume key TTL after a renewal = %v, want the window (1h) again", ttl)
	}
	if _, _, err := d.Resume(ctx, 9, s.Epoch, directory.ResumeHash{1}, 2); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, d.ResumeKey(9)).Val(); n != 0 {
		t.Fatal("the resume key outlived its use")
	}
}
