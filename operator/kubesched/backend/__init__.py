"""kubesched.backend"""
