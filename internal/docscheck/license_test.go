package docscheck

import (
	"strings"
	"testing"
)

// license is the SPDX identifier of the license the repository's LICENSE
// holds.
const license = "Apache-2.0"

// TestLicenseIsNamedWhereItShips wants the Apache License 2.0 in LICENSE
// and the same license named wherever leasewrap is shipped from: the
// packages' metadata, the archives, both images' labels and the README.
func TestLicenseIsNamedWhereItShips(t *testing.T) {
	text := read(t, "LICENSE")
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(text, want) {
			t.Errorf("LICENSE lacks %q: it should be the Apache License 2.0", want)
		}
	}
	places := []struct{ file, want string }{
		{".goreleaser.yaml", "license: " + license},
		{".goreleaser.yaml", "org.opencontainers.image.licenses: " + license},
		{".goreleaser.yaml", "- src: LICENSE"},
		{".goreleaser.yaml", "      - LICENSE\n"},
		{"Dockerfile", "org.opencontainers.image.licenses=" + license},
		{"README.md", "[Apache License 2.0](LICENSE)"},
	}
	for _, p := range places {
		if !strings.Contains(read(t, p.file), p.want) {
			t.Errorf("%s does not name the license: want %q in it", p.file, p.want)
		}
	}
}
