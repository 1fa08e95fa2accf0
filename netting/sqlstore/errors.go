package sqlstore

import "github.com/shardwise/shardwise/errcode"

// CodeStoreCorrupt is the code of stored bytes this package cannot decode.
const CodeStoreCorrupt = "STORE.CORRUPT"

// ErrLegsMalformed matches a stored journal legs value that does not
// decode (code STORE.CORRUPT).
var ErrLegsMalformed = errcode.New(CodeStoreCorrupt, "sqlstore: stored legs malformed")
