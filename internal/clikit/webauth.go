package clikit

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// WebConfigAuth says whether the web config file at path makes clients
// authenticate: basic auth users, or TLS that requires a client certificate.
// Without either, anyone who reaches the listener reads the findings (users,
// jobs, teams) and the audit log. Call it after ValidateWebConfig.
func WebConfigAuth(path string) (bool, error) {
	data, err := configfile.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("--web.config.file %s: %w", path, err)
	}
	var doc map[string]any
	if _, err := configfile.Decode(path, data, &doc); err != nil {
		return false, fmt.Errorf("--web.config.file: %w", err)
	}
	if users, ok := doc["basic_auth_users"].(map[string]any); ok && len(users) > 0 {
		return true, nil
	}
	if tlsCfg, ok := doc["tls_server_config"].(map[string]any); ok {
		switch tlsCfg["client_auth_type"] {
		case "RequireAndVerifyClientCert", "RequireAnyClientCert":
			return true, nil
		}
	}
	return false, nil
}

// OpenWithoutAuth returns the addresses among addrs that other hosts can
// reach (anything but loopback: a wildcard, an interface's address, a host
// name, vsock) when the web config makes no client authenticate, and none
// otherwise. A daemon whose page shows users, jobs and the audit log warns
// once at start for what it returns.
func OpenWithoutAuth(flags *web.FlagConfig, addrs []string) ([]string, error) {
	if flags != nil && flags.WebConfigFile != nil && *flags.WebConfigFile != "" {
		auth, err := WebConfigAuth(*flags.WebConfigFile)
		if err != nil || auth {
			return nil, err
		}
	}
	var open []string
	for _, a := range addrs {
		if !loopback(a) {
			open = append(open, a)
		}
	}
	return open, nil
}

// loopback reports whether a listen address is bound to loopback only.
func loopback(addr string) bool {
	if strings.HasPrefix(addr, "vsock://") {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// OpenListenerWarning is the start-up warning for OpenWithoutAuth's
// addresses.
const OpenListenerWarning = "listening beyond loopback without authentication: anyone who reaches these addresses reads the findings (users, jobs, teams) and the audit log; give --web.config.file with basic_auth_users (or required client certificates) and TLS, or listen on 127.0.0.1"
