package testseed_test

import (
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
)

func TestSeedFromEnv(t *testing.T) {
	t.Setenv(testseed.Env, "12345")
	if got := testseed.Seed(t); got != 12345 {
		t.Fatalf("Seed = %d, want 12345 from %s", got, testseed.Env)
	}
}

func TestSeedRandomWithoutEnv(t *testing.T) {
	t.Setenv(testseed.Env, "")
	a, b := testseed.Seed(t), testseed.Seed(t)
	if a == b {
		t.Fatalf("two seeds without %s were both %d", testseed.Env, a)
	}
}
