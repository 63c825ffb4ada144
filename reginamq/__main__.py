from reginamq.cli import main

main()
