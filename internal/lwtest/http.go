package lwtest

import (
	"io"
	"net/http"
	"testing"
)

// Get fetches base+path (base with its scheme) and returns the status, the
// body and the headers.
func Get(t testing.TB, base, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}
