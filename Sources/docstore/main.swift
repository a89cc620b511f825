import DocStore
print("x")
