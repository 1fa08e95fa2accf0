// Package zonegate is the player gateway role of a zone node: the adapter
// that makes a zone.Runtime the World of a gateway.Gateway, so that the
// clients connected to the node's sockets play the runtime's module.
//
// What it owns:
//   - World: the runtime's world side of the role (zone.Runtime.Sessions)
//     as a gateway.World. Join, Input and Leave are handed on with the
//     *gateway.Session adapted to the zone.Session port; Input is checked
//     by the module (Players.CheckInput) on the gateway's goroutine.
//   - SetGateway: the gateway whose sockets the runtime closes when a
//     login on another node takes a player over (gateway.Gateway.Displaced
//     adapted to the zone.Gateway port).
//
// What it does not own: the sockets, the login, the session directory and
// resume credentials (package gateway); the player protocol on the world
// side (package zone: one session per account on the world goroutine,
// one master per account across the cluster, takeover, the save fence,
// spawn and load, the session fence on inputs) — that is the cluster
// protocol, and the simulation (zone/zonesim) runs it without a gateway;
// the process that serves the gateway over HTTP with the browser client
// (zone/zonehost).
//
// Layering: zonegate imports zone and gateway; zone imports neither
// zonegate nor gateway (a client's input is package
// gateway/clientinput's type, which gateway.Input is), so a game module
// that imports zone does not pull in the WebSocket stack. zonehost
// imports zonegate.
//
// Invariant: one session, one zone.Session value. The runtime knows a
// session by equality (==), and the adapter of a *gateway.Session is a
// struct holding the pointer: every call about a session passes an equal
// value, whichever of World's methods it comes from.
package zonegate
