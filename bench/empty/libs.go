//go:build samelibs

package main

// Built with the samelibs tag, this program starts every library
// leasewrap links (see bench/libs).
import _ "github.com/redbite/leasewrap/bench/libs"
