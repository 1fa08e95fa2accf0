package interest

import "strconv"

func i32(v int32) string { return strconv.Itoa(int(v)) }
func u(v uint64) string  { return strconv.FormatUint(v, 10) }
