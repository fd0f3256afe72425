"""kubesched.api"""
