cat <<EOF > out
hello
EOF