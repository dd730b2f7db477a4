package intercept

import "github.com/agentvault/agentvault/hostname"

// Destination is a normalised "host:port" (see package hostname, the one
// place host names are normalised).
type Destination = hostname.Origin

// NormalizeDestination is hostname.Parse: hostport (port optional,
// defaultPort used when absent) in its canonical form, or
// destination_unauthorized.
func NormalizeDestination(hostport string, defaultPort int) (Destination, error) {
	return hostname.Parse(hostport, defaultPort)
}
