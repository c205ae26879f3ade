// Command gen writes a self-signed certificate for the JavaScript
// package's TLS tests: go run ./internal/selfsigned/gen DIR NAME HOST...
// It prints the certificate's serial number.
package main

import (
	"fmt"
	"os"

	"github.com/edgelimit/edgelimit/internal/selfsigned"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR NAME HOST...")
		os.Exit(2)
	}
	p, err := selfsigned.Write(os.Args[1], os.Args[2], os.Args[3:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p.Cert.SerialNumber.String())
}
