package interest

import "github.com/shardwise/shardwise/torus"

// ChunkPos is the torus chunk address (column X, Y and vertical slab).
type ChunkPos = torus.ChunkPos

// Column is the vertical stack of chunks at one (X, Y).
type Column struct{ X, Y int32 }

// ColumnOf returns the column chunk c stands in.
func ColumnOf(c ChunkPos) Column { return Column{X: c.X, Y: c.Y} }

func normaliseColumn(w torus.World, c Column) Column {
	return ColumnOf(w.NormaliseChunk(ChunkPos{X: c.X, Y: c.Y}))
}

func columnDistance(w torus.World, a, b Column) int {
	return w.ChunkDistance(ChunkPos{X: a.X, Y: a.Y}, ChunkPos{X: b.X, Y: b.Y})
}
