package redisdir_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory/redisdir"
	"github.com/shardwise/shardwise/internal/testseed"
)

// hashTag is the part of key that Redis Cluster hashes, by the rule in the
// cluster specification: the text between the first '{' and the first '}'
// after it when that text is non-empty, else the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// An account's keys must hash to one cluster slot, or every script on
// them fails with CROSSSLOT; distinct accounts never share a key.
func TestAccountKeysShareOneHashTag(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	d, err := redisdir.New(redisdir.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	accounts := []account.ID{1, 7, 10, 100, 1001, 10010, math.MaxUint64}
	for range 200 {
		accounts = append(accounts, account.ID(1+r.Uint64N(math.MaxUint64)>>r.UintN(64)))
	}
	seen := map[string]account.ID{}
	for _, a := range accounts {
		s, k, r := d.SessionKey(a), d.CountersKey(a), d.ResumeKey(a)
		if s == k || s == r || k == r {
			t.Fatalf("account %s: one key for two hashes", a)
		}
		if hashTag(s) != hashTag(k) || hashTag(s) != hashTag(r) || hashTag(s) == s {
			t.Errorf("account %s: keys %q, %q and %q hash by tags %q, %q and %q; want one shared tag", a, s, k, r, hashTag(s), hashTag(k), hashTag(r))
		}
		for _, key := range []string{s, k, r} {
			if other, ok := seen[key]; ok && other != a {
				t.Fatalf("accounts %s and %s share key %q", a, other, key)
			}
			seen[key] = a
		}
	}
}

// The account in a key is its canonical text, inside the "{@…}" tag that
// string accounts had: an account whose old name was its decimal text keeps
// the keys it had.
func TestAccountKeysAreCanonicalText(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	d, err := redisdir.New(redisdir.Config{Client: c, KeyPrefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	if s, k := d.SessionKey(1001), d.CountersKey(1001); s != "p:{@1001}:s" || k != "p:{@1001}:c" {
		t.Fatalf("keys of account 1001 are %q and %q, want p:{@1001}:s and p:{@1001}:c", s, k)
	}
	if r := d.ResumeKey(1001); r != "p:{@1001}:r" {
		t.Fatalf("resume key of account 1001 is %q, want p:{@1001}:r", r)
	}
}
