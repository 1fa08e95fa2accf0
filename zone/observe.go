package zone

import "github.com/shardwise/shardwise/cells"

// Bands returns the border widths the runtime runs with (Config.Bands with
// cells' defaults filled in), for an observer that draws them (package
// dashboard). Safe from any goroutine: the configuration never changes
// after New.
func (r *Runtime) Bands() cells.Bands { return r.cfg.Bands }
