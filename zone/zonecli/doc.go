// Package zonecli is the "zone" command of the shardwise CLI as a library:
// one zone node as its own process (zonehost.Host), with every flag, check and
// service of "shardwise zone" (etcd, certificates, the gateway, metrics and
// the probes, the dashboard, the status lines), hosting whichever modules
// its caller names. cmd/shardwise builds it with the reference game and
// examples/wander; a user's own main builds it with the user's module
// (examples/wander/cmd/wander-zone; docs/modules.md walks through one).
//
//	func main() { zonecli.Main(zonecli.Module{Name: "mine", New: newMine}) }
//
// What it owns:
//   - The node's flags (--endpoints, --name, --certs, --listen, --gateway
//     and the rest: "shardwise zone --help"), their checks, and the renaming
//     of a configuration error about a field to the flag that sets it, so
//     the user reads the flag typed.
//   - --module, shown only when the command hosts more than one module;
//     each Module's own flags, refused (as "is for --module X") when another
//     module runs.
//   - The status lines, the summary, the dashboard, and the process's
//     signals in Main.
//
// What it does not own: the node (zonehost.Host), any module's configuration
// or the meaning of its flags (the Module's New), the region table's
// grid (the Hosted runtime configuration, which must be the grid the
// table was written over).
//
// Invariants:
//  1. Every refusal of a flag is an errcode.ConfigError naming the flag as
//     typed ("--players"), returned with its code in front of the message,
//     before any I/O (no etcd, no socket, no file created).
//  2. The command starts nothing it does not stop: the dashboard, a
//     Hosted.Close and a module that is an io.Closer are closed when the
//     node returns, after its last tick.
//  3. Package zone does not import this package or cobra: the runtime is
//     usable without any CLI.
package zonecli
