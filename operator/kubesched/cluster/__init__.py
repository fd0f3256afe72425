"""kubesched.cluster"""
