package clikit

import (
	"fmt"

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
