package interest

// plantedBugs put back, for a test only, bugs the seam properties must
// catch (TestSeamPropertiesBite in seam_bite_test.go): each one once went,
// or could go, unseen by every property of the package. Production code
// never sets them; the zero value is the correct package.
type plantedBugs struct {
	marginOffByOne bool // ViewManifest releases a chunk at Radius+ReleaseMargin, not only beyond it
	noWrapRelease  bool // ViewManifest's release test takes plain differences, ignoring the seam
	rawMarkSent    bool // MarkSent does not normalise its chunk
	rawReindex     bool // Visibility.Reindex does not normalise its chunk
}

// plantedKeeps is View.Keeps with marginOffByOne and noWrapRelease.
func (s *Subscriptions[S]) plantedKeeps(v View, anchor, c ChunkPos) bool {
	dx, dy, ds := s.world.ChunkDelta(anchor, c)
	if s.plant.noWrapRelease {
		dx, dy = int(c.X)-int(anchor.X), int(c.Y)-int(anchor.Y)
	}
	m := v.ReleaseMargin
	if s.plant.marginOffByOne {
		m--
	}
	return max(abs(dx), abs(dy)) <= v.Radius+m && abs(ds) <= v.Slabs+m
}
