package redisdir_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shardwise/shardwise/directory/redisdir"
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

// An account's two keys must hash to one cluster slot, whatever bytes the
// account holds, or every script on them fails with CROSSSLOT.
func TestAccountKeysShareOneHashTag(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	d, err := redisdir.New(redisdir.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	for _, account := range []string{"alice", "}", "}x", "{", "{}", "a}b", "a{b}c", "}}{{", "@"} {
		s, k := d.SessionKey(account), d.CountersKey(account)
		if s == k {
			t.Fatalf("account %q: one key for both hashes", account)
		}
		if hashTag(s) != hashTag(k) || hashTag(s) == s {
			t.Errorf("account %q: keys %q and %q hash by tags %q and %q; want one shared tag", account, s, k, hashTag(s), hashTag(k))
		}
	}
	// Distinct accounts never share a key.
	if d.SessionKey("a}") == d.SessionKey("a") || d.SessionKey("}") == d.CountersKey("") {
		t.Fatal("two accounts share a key")
	}
}
