from evalq.cli import main

main()
