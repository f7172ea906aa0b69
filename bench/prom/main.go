// Command prom does nothing but link client_golang, leasewrap's metrics
// library, whose packages (and theirs: protobuf, procfs) initialise
// themselves before main: the start-up a Go program pays for it alone,
// next to bench/empty's and `leasewrap version`'s.
package main

import _ "github.com/prometheus/client_golang/prometheus"

func main() {}
