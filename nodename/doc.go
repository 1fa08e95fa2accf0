// Package nodename is the one rule for a node's name. A node's name is the
// same string in four places: its coord member name (and etcd key
// names/<name>), its link peer id (the name in its certificate,
// shardwise://node/<name>, and the files shardwise certs writes), and its
// owner entry in the cells region table. All of them check it with Check,
// so a name one of them accepts is accepted by all.
//
// It owns the rule and its error; it does not own where names are stored
// or how they are claimed (coord), nor certificates (link).
//
// The rule: 1 to MaxLen bytes of [a-z0-9._-], starting with a letter or a
// digit. So a name is safe, unchanged and unescaped, in a URI path, an etcd
// key, a file name, a metric label, a log line and a command line:
//   - lowercase only, because file systems and DNS that ignore case would
//     make "Zone-A" and "zone-a" one file or one host;
//   - no leading dot, so neither "." nor ".." (path segments a URI resolver
//     or a file system gives a meaning) nor a hidden file ".a.pem";
//   - no leading "-" or "_", so a name never reads as a command-line flag,
//     and the rule stays one sentence.
//
// The package has no I/O and no state, and imports only the standard
// library and errcode.
package nodename
