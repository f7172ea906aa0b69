package ping

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Parse checks a monitor's ping URL: it must be an absolute http:// or
// https:// URL with a host. The error is one line that names what is wrong
// and never repeats the URL, whose path, query or user info may hold a
// secret. A user name and password, if any, are sent as HTTP Basic
// authentication (for a self-hosted server behind a proxy that asks for it).
func Parse(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("ping URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// *url.Error repeats the whole URL: keep only its reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("ping URL is not a valid URL: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "":
		return nil, errors.New("ping URL must start with http:// or https://")
	default:
		return nil, fmt.Errorf("ping URL must start with http:// or https://, not %s", quoteScheme(u.Scheme+":"))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errors.New("ping URL has no host (want http[s]://host/path)")
	}
	if u.Hostname() == "" {
		return nil, errors.New("ping URL has a port but no host name")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// quoteScheme quotes a scheme for an error message. url.Parse only accepts
// schemes made of letters, digits, '+', '-' and '.', so nothing secret or
// unprintable can be in it; it is shortened anyway.
func quoteScheme(s string) string {
	if len(s) > 16 {
		s = s[:16] + "…"
	}
	return fmt.Sprintf("%q", s)
}
