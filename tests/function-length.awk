# tests/function-length.awk - prints "FILE:NAME LINES" for every function
# definition of our style (the signature from column 0, its "{" and "}"
# alone at column 0: STYLE.md, as every .c, .cc and .cu file here is
# written) whose body, from "{" to "}", is longer than max lines.
# Run: awk -v max=120 -f tests/function-length.awk FILES...
FNR == 1 { infn = 0; sig = "" }
/^[A-Za-z_].*\(/ && !infn {
	line = $0
	if (match(line, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)) {
		name = substr(line, RSTART, RLENGTH)
		sub(/[ \t]*\($/, "", name)
		sig = name
	}
	next
}
/^\{[ \t]*$/ && !infn { infn = 1; start = FNR; fname = sig; next }
/^\}/ && infn {
	n = FNR - start + 1
	if (n > max)
		printf "%s:%s %d\n", FILENAME, fname, n
	infn = 0
	sig = ""
}
