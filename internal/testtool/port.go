package testtool

import (
	"net"
	"strconv"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server the test starts as a separate process (prometheus, alertmanager,
// mailpit), which must be told its port on the command line.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr is FreePort as "127.0.0.1:PORT".
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}
