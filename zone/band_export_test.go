package zone

import (
	"slices"

	"github.com/shardwise/shardwise/torus"
)

// BandUnsubscribed returns the chunks of r's interaction band that r
// does not receive from every live simulator of theirs (as its held
// table names them): the simulation ghosts there would be missing.
func (r *Runtime) BandUnsubscribed() []torus.ChunkPos {
	c := r.cluster
	var out []torus.ChunkPos
	for _, ch := range sortedChunks(c.band) {
		for _, p := range c.simulators(nil, ch) {
			if !slices.Contains(c.wants[ch], p) {
				out = append(out, ch)
				break
			}
		}
	}
	return out
}
