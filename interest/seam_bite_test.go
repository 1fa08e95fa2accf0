package interest

import (
	"fmt"
	"testing"
)

// TestSeamPropertiesBite plants back, one at a time, the bugs the seam
// properties exist for (plantedBugs in plant.go) and requires each
// property to catch each bug within its 40 seeds, logging the first seed
// that does. A property that catches nothing planted proves nothing: before
// the scene kept its own model and fed the package unnormalised keys, only
// the seam-blind release was caught (by the translation).
func TestSeamPropertiesBite(t *testing.T) {
	for _, p := range []struct {
		name string
		bugs plantedBugs
	}{
		{"margin", plantedBugs{marginOffByOne: true}},
		{"nowrap", plantedBugs{noWrapRelease: true}},
		{"rawmarksent", plantedBugs{rawMarkSent: true}},
		{"rawreindex", plantedBugs{rawReindex: true}},
	} {
		t.Run(p.name, func(t *testing.T) {
			naive := firstCatch(t, func(seed uint64) error {
				s := newScene(t, seed, 0, true)
				s.subs.plant = p.bugs
				return s.run(25)
			})
			translated := firstCatch(t, func(seed uint64) error { return translatedDiff(t, seed, p.bugs) })
			t.Logf("caught by the naive model at %s, by the translation at %s", naive, translated)
			if naive == "" || translated == "" {
				t.Errorf("planted %s went unseen (naive model %q, translation %q)", p.name, naive, translated)
			}
		})
	}
}

// firstCatch runs the property on seeds 0…39 until it fails and names the
// seed and the failure; "" when it never fails.
func firstCatch(t *testing.T, property func(seed uint64) error) string {
	t.Helper()
	for seed := range uint64(40) {
		if err := property(seed); err != nil {
			return fmt.Sprintf("seed %d (%v)", seed, err)
		}
	}
	return ""
}
