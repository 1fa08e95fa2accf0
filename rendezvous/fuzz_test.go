package rendezvous

import (
	"slices"
	"strings"
	"testing"
)

// FuzzOwnerAgainstBruteForce takes a newline-separated node list (as an
// operator might paste it) and a key of arbitrary bytes, and checks New's
// validation, Owner and TopN against the brute-force definition.
func FuzzOwnerAgainstBruteForce(f *testing.F) {
	f.Add("node-a,node-b", "wrld_own_0")
	f.Add("node-a,node-b", "wrld_ds_0")
	f.Add("a,b,a", "k")
	f.Add("", "k")
	f.Add("é,€,😀,x", "clé\xff😀")
	f.Fuzz(func(t *testing.T, list, key string) {
		nodes := strings.Split(list, ",")
		if len(nodes) > 64 {
			nodes = nodes[:64]
		}
		tbl, err := New(nodes)
		dup := false
		for i := range nodes {
			if slices.Contains(nodes[:i], nodes[i]) {
				dup = true
			}
		}
		if dup != (err != nil) {
			t.Fatalf("New(%q): err %v, duplicate %v", nodes, err, dup)
		}
		if err != nil {
			return
		}
		want := bruteRank(nodes, nil, key)
		if got := tbl.Owner(key); got != want[0] {
			t.Fatalf("Owner(%q) = %q, want %q", key, got, want[0])
		}
		if got := tbl.TopN(key, len(nodes)); !slices.Equal(got, want) {
			t.Fatalf("TopN(%q) = %q, want %q", key, got, want)
		}
	})
}
