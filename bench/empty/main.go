// Command empty does nothing: the start-up cost of any Go program on this
// machine, which `leasewrap version` is measured against.
package main

func main() {}
